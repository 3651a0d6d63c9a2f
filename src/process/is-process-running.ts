/**
 * Whether a process with this id runs on this machine. Signal 0 only checks: ESRCH means there
 * is none; EPERM (a process of another user) or anything else counts as running, so a lock or
 * claim is never taken from a process that may still hold it.
 */
export function isProcessRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
