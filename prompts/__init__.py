"""Prompt templates for the investigation agent (Markdown files rendered strictly)."""
