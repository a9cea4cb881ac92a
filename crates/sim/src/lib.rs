//! sim: placeholder, filled in by its issue.
