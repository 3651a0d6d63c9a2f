import { stdSerializers } from "pino";

/** How deep nested errors (an `AggregateError`'s members, errors in fields) are looked through. */
const MAX_DEPTH = 3;

/**
 * pino's error serializer, without the arguments of the Redis command that failed: ioredis puts
 * the command on its errors (`command: { name, args }`), and a refused `AUTH` or `HELLO` carries
 * the password in them, which must not reach the logs. The command's name stays.
 */
export function serializeLogError(error: unknown): unknown {
  const serialized: unknown = stdSerializers.err(error as Error);
  hideCommandArguments(serialized, 0);
  return serialized;
}

function hideCommandArguments(value: unknown, depth: number): void {
  if (depth > MAX_DEPTH || typeof value !== "object" || value === null) return;
  if (Array.isArray(value)) {
    for (const each of value) hideCommandArguments(each, depth + 1);
    return;
  }
  const fields = value as Record<string, unknown>;
  for (const [key, field] of Object.entries(fields)) {
    if (key === "command" && typeof field === "object" && field !== null && "args" in field) {
      const { args: _args, ...rest } = field as Record<string, unknown>;
      fields[key] = rest;
    } else {
      hideCommandArguments(field, depth + 1);
    }
  }
}
