"""The report wing: the terminal summary's sections and the views behind them (servers, load, roofline, A/B,
xdist workers), built from records the session hands over, never from the session object."""
