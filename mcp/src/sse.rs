//! Legacy HTTP+SSE client transport (protocol revision 2024-11-05): being written.
