"""The report's sections (scoring layer, report): one module per section, each declaring its ``SECTION``
(:class:`avv_scoring.report.section.Section` or :class:`~avv_scoring.report.section.ModelSection`).
:func:`avv_scoring.report.section.sections` finds them all: a new section is one new module here, plus its test."""
