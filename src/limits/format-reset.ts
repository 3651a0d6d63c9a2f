/** A reset time as OpenAI writes it in `x-ratelimit-reset-*`: `17ms`, `1s`, `6m0s`. */
export function formatReset(milliseconds: number): string {
  if (milliseconds <= 0) return "0s";
  if (milliseconds < 1000) return `${Math.ceil(milliseconds)}ms`;
  const seconds = Math.ceil(milliseconds / 1000);
  const minutes = Math.floor(seconds / 60);
  return minutes > 0 ? `${minutes}m${seconds % 60}s` : `${seconds}s`;
}
