"""Outputs people read (scoring layer, above :mod:`avv_scoring.score`): the report's sections, each declared once
(:mod:`.section`, one module each in :mod:`.sections`), rendered as report.md (:mod:`.markdown`), report.html
(:mod:`.html`) and terminal tables (:mod:`.terminal`); the output files (:mod:`.outputs`); number formats, tables
and figures (:mod:`.format`); the escaping rules for text that reaches a person (:mod:`.escape`); one agent
trajectory step by step (:mod:`.trajectory`); the K2VV file formats (:mod:`.k2vv`)."""
