import { describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { ChatEngine, ModelStatus } from "../../src/engine/engine.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";

/**
 * An engine that reports a fixed status and is never asked to run anything here; with `changed`,
 * one whose source (a local model's file) has changed when that says so.
 */
function createFakeEngine(status: ModelStatus, changed?: () => boolean): ChatEngine {
  return {
    contextLength: undefined,
    supportsMultipleChoices: false,
    status: () => status,
    prepare: () => Promise.reject(new Error("not used")),
    close: async () => {},
    ...(changed === undefined ? {} : { sourceChanged: changed }),
  };
}

function createModel(id: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: undefined,
    created: 0,
    engine: { type: "llama", model: `/models/${id}.gguf`, parallel: 1, maxQueue: 4, threads: 1, gpu: false },
  };
}

describe("replacing the catalogue", () => {
  it("keeps the engines of unchanged models that are loaded or loading", () => {
    const statuses: Record<string, ModelStatus> = { ready: "available", warming: "loading" };
    let created = 0;
    const registry = new ModelRegistry([createModel("ready"), createModel("warming")], (model) => {
      created++;
      return createFakeEngine(statuses[model.id] ?? "unavailable");
    });
    const before = registry.list().map((entry) => entry.engine);

    const retired = registry.replace([createModel("ready"), createModel("warming")]);

    expect(retired).toEqual([]);
    expect(created).toBe(2);
    expect(registry.list().map((entry) => entry.engine)).toEqual(before);
  });

  it("rebuilds a model whose context_length changed, though its engine block did not", () => {
    const registry = new ModelRegistry([createModel("sized")], () => createFakeEngine("available"));
    const old = registry.get("sized")?.engine;

    const retired = registry.replace([{ ...createModel("sized"), contextLength: 2048 }]);

    expect(retired).toEqual([old]);
    expect(registry.get("sized")?.engine).not.toBe(old);
    expect(registry.get("sized")?.model.contextLength).toBe(2048);
  });

  it("rebuilds an unchanged model whose engine is unavailable (its file was missing at start)", () => {
    let fileInPlace = false;
    const registry = new ModelRegistry([createModel("missing")], () =>
      createFakeEngine(fileInPlace ? "loading" : "unavailable"),
    );
    const stale = registry.get("missing")?.engine;
    expect(stale?.status()).toBe("unavailable");

    fileInPlace = true;
    const retired = registry.replace([createModel("missing")]);

    expect(retired).toEqual([stale]);
    const fresh = registry.get("missing")?.engine;
    expect(fresh).not.toBe(stale);
    expect(fresh?.status()).toBe("loading");
  });
});

describe("holding an engine", () => {
  it("counts each request until its release, and a second release of one request does nothing", () => {
    const registry = new ModelRegistry([createModel("held")], () => createFakeEngine("available"));
    const engine = registry.get("held")?.engine;
    if (engine === undefined) throw new Error("no engine");
    expect(registry.isHeld(engine)).toBe(false);

    const first = registry.hold(engine);
    const second = registry.hold(engine);
    first();
    first();
    expect(registry.isHeld(engine)).toBe(true);
    second();
    expect(registry.isHeld(engine)).toBe(false);
  });
});

describe("replacing the catalogue when a model's source changed", () => {
  it("gives an unchanged model a new engine once its engine's source changed, loaded or loading", () => {
    const replaced = new Set<string>();
    const statuses: Record<string, ModelStatus> = {
      ready: "available",
      warming: "loading",
      kept: "available",
    };
    const registry = new ModelRegistry(
      [createModel("ready"), createModel("warming"), createModel("kept")],
      (model) => createFakeEngine(statuses[model.id] ?? "unavailable", () => replaced.has(model.id)),
    );
    const before = new Map(registry.list().map((entry) => [entry.model.id, entry.engine]));

    expect(registry.replace([createModel("ready"), createModel("warming"), createModel("kept")])).toEqual([]);

    replaced.add("ready").add("warming");
    const retired = registry.replace([createModel("ready"), createModel("warming"), createModel("kept")]);

    expect(retired).toEqual([before.get("ready"), before.get("warming")]);
    expect(registry.get("ready")?.engine).not.toBe(before.get("ready"));
    expect(registry.get("warming")?.engine).not.toBe(before.get("warming"));
    expect(registry.get("kept")?.engine).toBe(before.get("kept"));
  });

  it("keeps an engine that cannot tell (an upstream) while its configuration is unchanged", () => {
    const registry = new ModelRegistry([createModel("upstream")], () => createFakeEngine("available"));
    const engine = registry.get("upstream")?.engine;

    expect(registry.replace([createModel("upstream")])).toEqual([]);
    expect(registry.get("upstream")?.engine).toBe(engine);
  });
});

describe("a model's load", () => {
  it("adds the requests of engines a reload replaced until they are forgotten (closed)", () => {
    const loads = [
      { running: 2, waiting: 3 },
      { running: 1, waiting: 0 },
    ];
    let created = 0;
    const registry = new ModelRegistry([createModel("busy")], () => {
      const load = loads[created++] ?? { running: 0, waiting: 0 };
      return { ...createFakeEngine("available"), load: () => load };
    });
    const [retired] = registry.replace([{ ...createModel("busy"), contextLength: 4096 }]);
    expect(retired).toBeDefined();
    expect(registry.loadOf("busy")).toEqual({ running: 3, waiting: 3 });
    if (retired !== undefined) registry.forgetRetired(retired);
    expect(registry.loadOf("busy")).toEqual({ running: 1, waiting: 0 });
    expect(registry.loadOf("absent")).toBeUndefined();
  });
});
