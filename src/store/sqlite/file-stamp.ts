/** `20250601T120000Z`: a UTC time for file names, which sorts as text and is valid everywhere. */
export function fileStamp(now: Date): string {
  return now
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replace(/[-:]/g, "");
}
