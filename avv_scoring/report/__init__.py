"""Outputs people read: scores.csv / scores.json / report.md (outputs), report.html, their sections, and the
escaping rules for text that reaches a person."""
