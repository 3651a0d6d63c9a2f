/**
 * A value attached to thrown errors without changing them (an error may be any object, shared,
 * or frozen): `mark` sets it on one, `of` reads it back from whatever was caught.
 */
export function createErrorMark<Value>() {
  const marks = new WeakMap<object, Value>();
  return {
    mark<Failure extends object>(error: Failure, value: Value): Failure {
      marks.set(error, value);
      return error;
    },
    of(error: unknown): Value | undefined {
      return typeof error === "object" && error !== null ? marks.get(error) : undefined;
    },
  };
}
