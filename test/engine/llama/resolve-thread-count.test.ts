import { describe, expect, it } from "vitest";
import { resolveThreadCount } from "../../../src/engine/llama/resolve-thread-count.ts";

describe("resolveThreadCount", () => {
  it("uses the configured count, whole and at least one", () => {
    expect(resolveThreadCount({ configured: 3, llama: { cpuMathCores: 16 }, availableCpus: 16 })).toBe(3);
    expect(resolveThreadCount({ configured: 2.7, llama: { cpuMathCores: 16 }, availableCpus: 16 })).toBe(2);
    expect(resolveThreadCount({ configured: 0, llama: { cpuMathCores: 16 }, availableCpus: 16 })).toBe(1);
  });

  it("leaves one core to the HTTP edge by default, and uses at least one", () => {
    expect(resolveThreadCount({ configured: undefined, llama: { cpuMathCores: 8 }, availableCpus: 16 })).toBe(
      7,
    );
    expect(resolveThreadCount({ configured: undefined, llama: { cpuMathCores: 2 }, availableCpus: 2 })).toBe(
      1,
    );
    expect(resolveThreadCount({ configured: undefined, llama: { cpuMathCores: 1 }, availableCpus: 1 })).toBe(
      1,
    );
  });

  it("counts only the CPUs the process may run on (a pinned process or a container's cpuset)", () => {
    expect(resolveThreadCount({ configured: undefined, llama: { cpuMathCores: 32 }, availableCpus: 2 })).toBe(
      1,
    );
    expect(resolveThreadCount({ configured: undefined, llama: { cpuMathCores: 32 }, availableCpus: 4 })).toBe(
      3,
    );
  });
});
