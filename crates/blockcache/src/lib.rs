//! # blockcache: an Open-CAS-style cached block device (under construction).
