//! What an idle master gives back.
//!
//! Owns the master's memory between bursts: the PTY read buffer is allocated when the child
//! has written something and dropped when the session goes idle; the session log's lines
//! waiting to be written are written and their buffer dropped; screen rows that show
//! nothing give their cells back; clients' empty queues and decode buffers give their capacity
//! back; then the allocator returns its free pages to the kernel. A fleet of idle sessions
//! thereby costs what each one shows, not what its busiest moment needed. Invariants: nothing
//! any client or the screen model can observe changes; it runs only at the edge into idleness
//! (output went quiet, start-up settled), never on the per-byte path, so a flood does not pay
//! for it, nor on a query client's visit, so a `desk ls` does not make an idle master fault
//! in again what it gave back. Each part gives back its own (`Terminal::release_read_buf`,
//! `ClientTable::release_idle_memory`, the screen model's and the log's); the loop calls them
//! together (`Master::release_idle_memory`) and then [`trim_allocator`].

/// One malloc arena for the whole master. glibc gives a second thread an arena of its own on its
/// first allocation, and keeps it (16 KiB of private pages here) after the thread has ended; the
/// master's other threads are the short-lived ones that make a start's records durable
/// (`durable_start`), so a shared arena costs no contention and keeps an idle master in
/// a fleet under 256 KiB. Call before any thread starts.
pub(super) fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes plain integers; called while the master is still single-threaded.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Take [`desk_common::session::MASTER_GLIBC_TUNABLES`] (glibc has read it already, at start)
/// out of the environment, so the child and any process the master starts do not inherit it.
/// A `GLIBC_TUNABLES` of anyone else's is left as it is. Call before any thread starts.
pub(super) fn forget_own_tunables() {
    if std::env::var_os("GLIBC_TUNABLES").is_some_and(|v| v == desk_common::session::MASTER_GLIBC_TUNABLES) {
        // SAFETY: the master is still single-threaded: nothing reads the environment meanwhile.
        unsafe { std::env::remove_var("GLIBC_TUNABLES") };
    }
}

/// Return the allocator's free memory to the kernel. glibc's malloc keeps freed chunks (and
/// trims only the top of the heap, past 128 KiB); `malloc_trim` also releases whole free pages
/// inside the heap. Other C libraries have no such call and keep their own policy.
pub(super) fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and may be called at any time outside a signal
    // handler; the master is single-threaded.
    unsafe {
        libc::malloc_trim(0);
    }
}
