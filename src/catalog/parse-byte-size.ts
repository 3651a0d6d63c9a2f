/**
 * A size such as "8mb", "512kb", "1gb", "100b" or a plain number of bytes (1kb = 1024 bytes, as
 * in the `bytes` package Fastify's ecosystem uses). Units are case-insensitive. Returns
 * `undefined` for anything else, including fractions and sizes below 1 byte.
 */
export function parseByteSize(value: string | number): number | undefined {
  if (typeof value === "number") {
    return Number.isSafeInteger(value) && value >= 1 ? value : undefined;
  }
  const match = /^([0-9]+)\s*(b|kb|mb|gb)?$/i.exec(value);
  if (match === null) return undefined;
  const unit = (match[2] ?? "b").toLowerCase();
  const bytes = Number(match[1]) * (UNIT_BYTES[unit] ?? Number.NaN);
  return Number.isSafeInteger(bytes) && bytes >= 1 ? bytes : undefined;
}

const UNIT_BYTES: Readonly<Record<string, number>> = {
  b: 1,
  kb: 1024,
  mb: 1024 ** 2,
  gb: 1024 ** 3,
};
