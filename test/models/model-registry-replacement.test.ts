/**
 * A reload's new engine that still loads takes over from the engine serving the model only once
 * it has loaded, and never when it fails (ModelRegistry.replace): the cases around that rule.
 */

import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { ChatEngine, ModelStatus } from "../../src/engine/engine.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { until } from "../support/until.ts";

/** An engine whose status the test sets, that tells whether it was closed. */
interface FakeEngine extends ChatEngine {
  file: string;
  set(status: ModelStatus): void;
  readonly closed: boolean;
}

function createFakeEngine(file: string, status: ModelStatus): FakeEngine {
  let current = status;
  let closed = false;
  return {
    file,
    contextLength: undefined,
    supportsMultipleChoices: false,
    status: () => (closed ? "unavailable" : current),
    prepare: () => Promise.reject(new Error("not used")),
    set(next) {
      current = next;
    },
    get closed() {
      return closed;
    },
    async close() {
      closed = true;
    },
  };
}

function createModel(id: string, file: string, price = "1"): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: price, outputPerMillion: "2" },
    contextLength: undefined,
    created: 0,
    engine: { type: "llama", model: file, parallel: 1, maxQueue: 4, threads: 1, gpu: false },
  };
}

/**
 * A registry whose engines start as `statusOf` says for their file (default: `loading`, as a
 * local model does), with what it retired and logged.
 */
function createRegistry(models: CatalogModel[], statusOf: Record<string, ModelStatus> = {}) {
  const created: FakeEngine[] = [];
  const retired: ChatEngine[] = [];
  const logged: { level: string; object: object; message: string | undefined }[] = [];
  const log = (level: string) => (object: object, message?: string) => {
    logged.push({ level, object, message });
  };
  const registry = new ModelRegistry(
    models,
    (model) => {
      const file = model.engine?.type === "llama" ? model.engine.model : "";
      const engine = createFakeEngine(file, statusOf[file] ?? "loading");
      created.push(engine);
      return engine;
    },
    {
      onRetired: (engine) => retired.push(engine),
      logger: { info: log("info"), warn: log("warn"), error: log("error") },
    },
  );
  const engineOf = (id: string) => registry.get(id)?.engine as FakeEngine | undefined;
  return { registry, created, retired, logged, engineOf };
}

describe("a reload that gives a served model a new engine still loading", () => {
  it("keeps the old engine serving, with the new prices, until the new one has loaded", async () => {
    const test = createRegistry([createModel("m", "a.gguf")], { "a.gguf": "available" });
    const old = test.engineOf("m");

    expect(test.registry.replace([createModel("m", "b.gguf", "5")])).toEqual([]);
    const replacement = test.registry.getReplacement("m") as FakeEngine;
    expect(replacement.file).toBe("b.gguf");
    expect(test.engineOf("m")).toBe(old);
    expect(test.registry.get("m")?.model.pricing).toMatchObject({ inputPerMillion: "5" });
    expect(test.registry.listReplacements()).toEqual(["m"]);

    replacement.set("available");
    await until(() => test.engineOf("m") === replacement);
    expect(test.retired).toEqual([old]);
    expect(test.registry.listReplacements()).toEqual([]);
    expect(test.registry.get("m")?.model.pricing).toMatchObject({ inputPerMillion: "5" });
    expect(test.logged.find((line) => line.level === "info")?.object).toEqual({
      model: "m",
      changed: ["engine.model"],
    });
  });

  it("closes a new engine that fails to load and logs that the old one keeps serving", async () => {
    const test = createRegistry([createModel("m", "a.gguf")], { "a.gguf": "available" });
    const old = test.engineOf("m");
    test.registry.replace([createModel("m", "typo.gguf")]);
    const replacement = test.registry.getReplacement("m") as FakeEngine;

    replacement.set("unavailable");
    await until(() => replacement.closed);
    expect(test.engineOf("m")).toBe(old);
    expect(old?.closed).toBe(false);
    expect(test.retired).toEqual([]);
    const [error] = test.logged.filter((line) => line.level === "error");
    expect(error?.object).toEqual({ model: "m", changed: ["engine.model"] });
    expect(error?.message).toContain("model 'm' (engine.model) failed to load");
    expect(error?.message).toContain("the previous engine keeps serving the model");

    // A later reload tries again.
    test.registry.replace([createModel("m", "fixed.gguf")]);
    expect((test.registry.getReplacement("m") as FakeEngine).file).toBe("fixed.gguf");
  });

  it("closes the replacement when another reload changes the settings again, or back", async () => {
    const test = createRegistry([createModel("m", "a.gguf")], { "a.gguf": "available" });
    const old = test.engineOf("m");
    test.registry.replace([createModel("m", "b.gguf")]);
    const first = test.registry.getReplacement("m") as FakeEngine;

    // The same settings again (a second SIGHUP, another model's prices edited): it goes on loading.
    test.registry.replace([createModel("m", "b.gguf", "3")]);
    expect(test.registry.getReplacement("m")).toBe(first);
    expect(first.closed).toBe(false);

    test.registry.replace([createModel("m", "c.gguf")]);
    const second = test.registry.getReplacement("m") as FakeEngine;
    expect(second.file).toBe("c.gguf");
    expect(first.closed).toBe(true);
    expect(test.engineOf("m")).toBe(old);

    // Back to the settings of the engine that serves: nothing left to replace.
    expect(test.registry.replace([createModel("m", "a.gguf")])).toEqual([]);
    expect(second.closed).toBe(true);
    expect(test.registry.getReplacement("m")).toBeUndefined();
    expect(test.engineOf("m")).toBe(old);
    first.set("available");
    second.set("available");
    await sleep(250);
    expect(test.engineOf("m")).toBe(old);
    expect(test.retired).toEqual([]);
  });

  it("retires the engine at once, and closes its replacement, when a reload removes the model", () => {
    const test = createRegistry([createModel("m", "a.gguf")], { "a.gguf": "available" });
    const old = test.engineOf("m");
    test.registry.replace([createModel("m", "b.gguf")]);
    const replacement = test.registry.getReplacement("m") as FakeEngine;

    expect(test.registry.replace([])).toEqual([old]);
    expect(replacement.closed).toBe(true);
    expect(test.registry.listReplacements()).toEqual([]);
  });

  it("closes a replacement still loading when the registry closes", async () => {
    const test = createRegistry([createModel("m", "a.gguf")], { "a.gguf": "available" });
    test.registry.replace([createModel("m", "b.gguf")]);
    const replacement = test.registry.getReplacement("m") as FakeEngine;
    await test.registry.close();
    expect(replacement.closed).toBe(true);
    expect(test.engineOf("m")?.closed).toBe(true);
  });
});

describe("a reload that gives a model a new engine, with nothing to keep", () => {
  it("serves with the new engine at once where the old one was unavailable or still loading", () => {
    const test = createRegistry([createModel("missing", "gone.gguf"), createModel("warming", "w.gguf")], {
      "gone.gguf": "unavailable",
    });
    const stale = test.engineOf("missing");
    const warming = test.engineOf("warming");

    const retired = test.registry.replace([
      createModel("missing", "found.gguf"),
      createModel("warming", "w2.gguf"),
    ]);

    expect(retired).toEqual([stale, warming]);
    expect(test.engineOf("missing")?.file).toBe("found.gguf");
    expect(test.engineOf("warming")?.file).toBe("w2.gguf");
    expect(test.registry.listReplacements()).toEqual([]);
  });

  it("serves with a new engine that is ready at once (an upstream) at once", () => {
    const test = createRegistry([createModel("m", "a.gguf")], {
      "a.gguf": "available",
      "b.gguf": "available",
    });
    const old = test.engineOf("m");

    expect(test.registry.replace([createModel("m", "b.gguf")])).toEqual([old]);
    expect(test.engineOf("m")?.file).toBe("b.gguf");
    expect(test.registry.listReplacements()).toEqual([]);
  });
});
