"""Plots of results files (matplotlib, an optional extra imported lazily): the A/B picture, boot timelines, history."""
