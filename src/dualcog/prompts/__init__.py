"""Prompts: the task templates (`templates`) and the rendering of every request's text and
ordered media keys (`render`)."""
