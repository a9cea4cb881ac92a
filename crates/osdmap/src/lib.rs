//! osdmap: placeholder, filled in by its issue.
