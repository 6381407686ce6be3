"""The networks of both papers: encoders, attention, decoders, their equations and how they are built; how their
teacher-forced loops run (`train.recurrence`) is loops.py's, the fast forms rnnmt/recurrence/'s."""
