//! rjenkins1: the only hash CRUSH defines (Ceph's src/crush/hash.c).
