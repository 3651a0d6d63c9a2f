import { stdSerializers } from "pino";

/** How deep nested errors (an `AggregateError`'s members, errors in fields) are looked through. */
const MAX_DEPTH = 8;

/**
 * pino's error serializer, without the arguments of the Redis command that failed: ioredis puts
 * the command on its errors (`command: { name, args }`), and a refused `AUTH` or `HELLO` carries
 * the password in them, which must not reach the logs. The command's name stays. What it returns
 * is a copy wherever a command was found: the caller's objects are left as they are.
 */
export function serializeLogError(error: unknown): unknown {
  return withoutCommandArguments(stdSerializers.err(error as Error), 0, new WeakSet());
}

function withoutCommandArguments(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (depth > MAX_DEPTH || typeof value !== "object" || value === null || seen.has(value)) return value;
  seen.add(value);
  if (Array.isArray(value)) {
    const items = value.map((each) => withoutCommandArguments(each, depth + 1, seen));
    return items.some((each, index) => each !== value[index]) ? items : value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [key, field] of Object.entries(value)) {
    let replaced = field;
    if (key === "command" && typeof field === "object" && field !== null && "args" in field) {
      const { args: _args, ...rest } = field as Record<string, unknown>;
      replaced = rest;
    } else {
      replaced = withoutCommandArguments(field, depth + 1, seen);
    }
    if (replaced !== field) {
      copy ??= Object.assign(Object.create(Object.getPrototypeOf(value) as object | null), value);
      (copy as Record<string, unknown>)[key] = replaced;
    }
  }
  return copy ?? value;
}
