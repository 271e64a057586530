"""Filter/score policy plugins behind one small interface."""
