import { describe, expect, it } from "vitest";
import { refuseUnsupportedToolTypes } from "../../src/api/refuse-unsupported-tool-types.ts";

describe("refuseUnsupportedToolTypes", () => {
  it("names the field and the kind of tool that is not supported", () => {
    const error = refuseUnsupportedToolTypes({ tools: [{ type: "function" }, { type: "custom" }] });
    expect(error?.code).toBe("invalid_value");
    expect(error?.param).toBe("tools[1].type");
    expect(error?.message).toBe(
      "Invalid value for 'tools[1].type': 'custom' tools are not supported; only 'function' tools are.",
    );
    const choice = refuseUnsupportedToolTypes({ tool_choice: { type: "allowed_tools" } });
    expect(choice?.param).toBe("tool_choice.type");
    // A kind of choice, not of tool (regression: "'allowed_tools' tools are not supported").
    expect(choice?.message).toBe(
      "Invalid value for 'tool_choice.type': 'allowed_tools' tool choices are not supported; only 'function' tool choices are.",
    );
    expect(refuseUnsupportedToolTypes({ tools: [{ type: "function" }] })).toBeUndefined();
  });

  // Regression: a type of 63 letters and an emoji was cut at 64 code units, echoing a lone "\ud83d".
  it("shortens a long type to 64 code units without cutting an emoji in half", () => {
    const error = refuseUnsupportedToolTypes({ tools: [{ type: `${"x".repeat(63)}😀 more` }] });
    expect(error?.message).toBe(
      `Invalid value for 'tools[0].type': '${"x".repeat(63)}' tools are not supported; only 'function' tools are.`,
    );
    const choice = refuseUnsupportedToolTypes({ tool_choice: { type: `${"y".repeat(62)}😀 more` } });
    expect(choice?.message).toContain(`'${"y".repeat(62)}😀'`);
  });
});
