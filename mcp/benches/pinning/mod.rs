//! Pinning a bench to one CPU, shared by the benches that run a second,
//! one-CPU pass.

/// Restricts this thread (and so every thread and process it starts) to
/// the last CPU it may run on; returns that CPU.
pub fn pin_to_one_cpu() -> anyhow::Result<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // and sched_setaffinity read and write at most `size_of::<cpu_set_t>()`
    // bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        anyhow::ensure!(
            libc::sched_getaffinity(0, size, &mut set) == 0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&c| libc::CPU_ISSET(c, &set))
            .ok_or_else(|| anyhow::anyhow!("no CPU in this process's affinity mask"))?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        anyhow::ensure!(
            libc::sched_setaffinity(0, size, &one) == 0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
        Ok(cpu)
    }
}
