"""The workflow's logic as plain Python: what runs at the active scale (plan), where every file lies (paths),
the rules' inputs and flags (inputs), the settings files and report inputs (reports). workflow/rules/common.smk
builds these once; the rule files only name them."""
