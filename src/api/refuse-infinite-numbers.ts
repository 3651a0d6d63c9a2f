import { AppError } from "../errors/app-error.ts";
import {
  convertInstancePathToParam,
  readValueAt,
  type SchemaValidationIssue,
} from "./map-validation-error.ts";

/** Whether a `type` issue's expected type (one or a list) takes numbers. */
function wantsNumber(type: unknown): boolean {
  return (Array.isArray(type) ? type : [type]).some((name) => name === "number" || name === "integer");
}

/**
 * A number JSON holds but a double cannot (`1e400` parses as Infinity), where the schema wants a
 * number: the validator calls it a wrong type ("expected a number"), which it is not. Refused as
 * the value out of range that it is, naming the field; `undefined` when no issue is about one.
 */
export function refuseInfiniteNumbers(
  issues: readonly SchemaValidationIssue[],
  body: unknown,
): AppError | undefined {
  for (const issue of issues) {
    if (issue.keyword !== "type" || !wantsNumber(issue.params.type)) continue;
    const value = readValueAt(body, issue.instancePath);
    if (typeof value !== "number" || Number.isFinite(value)) continue;
    const param = convertInstancePathToParam(issue.instancePath);
    return new AppError(
      "invalid_value",
      `Invalid value for '${param ?? "body"}': the number is too large for a double (beyond ±1.8e308); send a finite one.`,
      { param },
    );
  }
  return undefined;
}
