"""The audit's chapters, one package each named by its registered key (its spec, computation and figures), and the
chart helpers their figures share. Registered in book order in `llmaudit.registry`; this file imports nothing, so
importing one chapter never loads another."""
