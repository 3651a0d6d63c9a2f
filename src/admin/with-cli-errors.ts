import { AdminError } from "./admin-error.ts";
import { CliError } from "./cli-error.ts";

/**
 * Runs an admin operation for a CLI command: an {@link AdminError} becomes a {@link CliError}
 * with the same message (plus `hint` for `not_found`); anything else propagates unchanged.
 */
export async function withCliErrors<T>(
  operation: () => Promise<T>,
  hints: { notFound?: string } = {},
): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof AdminError) {
      const hint = error.kind === "not_found" && hints.notFound !== undefined ? ` ${hints.notFound}` : "";
      throw new CliError(`${error.message}${hint}`, { cause: error });
    }
    throw error;
  }
}
