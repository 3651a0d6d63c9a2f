import { describe, expect, it } from "vitest";
import { createEndpointBalancer } from "../../../src/engine/openai/create-endpoint-balancer.ts";

function setUp(endpoints = ["a", "b", "c"]) {
  let time = 0;
  const balancer = createEndpointBalancer({
    endpoints,
    failureThreshold: 2,
    cooldownMs: 1000,
    maxCooldownMs: 3000,
    now: () => time,
  });
  return { balancer, advance: (milliseconds: number) => (time += milliseconds) };
}

const fault = { endpointFault: true, retryAfterMs: undefined };

describe("createEndpointBalancer", () => {
  it("goes round-robin over the endpoints", () => {
    const { balancer } = setUp();
    expect([1, 2, 3, 4, 5].map(() => balancer.pick())).toEqual(["a", "b", "c", "a", "b"]);
  });

  it("skips excluded endpoints", () => {
    const { balancer } = setUp();
    expect(balancer.pick(new Set(["a", "b"]))).toBe("c");
    expect(balancer.pick(new Set(["a", "b", "c"]))).toBeUndefined();
  });

  it("cools an endpoint down after failures in a row, doubling up to the maximum", () => {
    const { balancer, advance } = setUp(["a", "b"]);
    balancer.reportFailure("a", fault);
    expect([balancer.pick(), balancer.pick()]).toEqual(["a", "b"]);
    balancer.reportFailure("a", fault);
    expect([balancer.pick(), balancer.pick()]).toEqual(["b", "b"]);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(1000);
    advance(1000);
    expect(balancer.pick(new Set(["b"]))).toBe("a");
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(2000);
    advance(2000);
    balancer.reportFailure("a", fault);
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(3000);
  });

  it("rests a first cooldown longer than the usual bound in full", () => {
    let time = 0;
    const balancer = createEndpointBalancer({
      endpoints: ["a", "b"],
      failureThreshold: 1,
      cooldownMs: 600_000,
      maxCooldownMs: 60_000,
      now: () => time,
    });
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(600_000);
    time += 600_000;
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(600_000);
  });

  it("keeps its state sound after any number of failures, with a cooldown of 0 too", () => {
    let time = 0;
    const balancer = createEndpointBalancer({
      endpoints: ["a"],
      failureThreshold: 1,
      cooldownMs: 0,
      maxCooldownMs: 60_000,
      now: () => time,
    });
    for (let failure = 0; failure < 1100; failure++) {
      balancer.reportFailure("a", fault);
      time += 1;
    }
    expect(balancer.allCoolingDown()).toBe(false);
    expect(balancer.pick()).toBe("a");
    // The upstream's retry-after still counts.
    balancer.reportFailure("a", { endpointFault: false, retryAfterMs: 500 });
    expect(balancer.waitForEndpoint()).toBe(500);
  });

  it("rests an endpoint once for a blip that failed many attempts at once (regression: 60 s)", () => {
    const { balancer, advance } = setUp(["a", "b"]);
    // Fifty attempts under way when the upstream blips: all fail within moments.
    const startedAt = 0;
    advance(10);
    for (let attempt = 0; attempt < 50; attempt++) {
      balancer.reportFailure("a", { ...fault, startedAt });
      advance(1);
    }
    // One cooldown of cooldownMs from the failure that began it, not doubled fifty times.
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(1000 - 49);
    advance(1000);
    // Attempts started before that cooldown began say nothing new when they fail late.
    balancer.reportFailure("a", { ...fault, startedAt });
    expect(balancer.pick(new Set(["b"]))).toBe("a");
    // One started after it began does: straight back, for twice as long.
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(2000);
    // A success ends the doubling: the next rest is cooldownMs again, after the threshold.
    advance(2000);
    balancer.reportSuccess("a");
    balancer.reportFailure("a", fault);
    expect(balancer.pick(new Set(["b"]))).toBe("a");
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(1000);
  });

  it("does not end the doubling for an answer begun before the rest", () => {
    const { balancer, advance } = setUp(["a", "b"]);
    const startedAt = 0;
    advance(10);
    balancer.reportFailure("a", fault);
    balancer.reportFailure("a", fault);
    advance(1000);
    // A long answer that was streaming when the rest began ends well after it: nothing new.
    balancer.reportSuccess("a", { startedAt });
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint(new Set(["b"]))).toBe(2000);
  });

  it("does not lengthen a rest for failures reported during it", () => {
    const { balancer, advance } = setUp(["a"]);
    balancer.reportFailure("a", fault);
    balancer.reportFailure("a", fault);
    advance(500);
    balancer.reportFailure("a", fault);
    balancer.reportFailure("a", fault);
    expect(balancer.waitForEndpoint()).toBe(500);
  });

  it("clears the failure count on success", () => {
    const { balancer } = setUp(["a"]);
    balancer.reportFailure("a", fault);
    balancer.reportSuccess("a");
    balancer.reportFailure("a", fault);
    expect(balancer.pick()).toBe("a");
  });

  it("tells when an endpoint begins to rest, once a rest", () => {
    let time = 0;
    const rested: string[] = [];
    const balancer = createEndpointBalancer({
      endpoints: ["a", "b"],
      failureThreshold: 2,
      cooldownMs: 1000,
      maxCooldownMs: 3000,
      now: () => time,
      onRest: (endpoint) => rested.push(endpoint),
    });
    balancer.reportFailure("a", fault);
    expect(rested).toEqual([]);
    balancer.reportFailure("a", fault);
    balancer.reportFailure("a", { endpointFault: false, retryAfterMs: 5000 });
    expect(rested).toEqual(["a"]);
    balancer.reportFailure("b", { endpointFault: false, retryAfterMs: 500 });
    expect(rested).toEqual(["a", "b"]);
    time += 600;
    balancer.reportFailure("b", { endpointFault: false, retryAfterMs: 500 });
    expect(rested).toEqual(["a", "b", "b"]);
  });

  it("keeps an endpoint out for its retry-after without counting a fault", () => {
    const { balancer, advance } = setUp(["a"]);
    balancer.reportFailure("a", { endpointFault: false, retryAfterMs: 500 });
    expect(balancer.pick()).toBeUndefined();
    expect(balancer.allCoolingDown()).toBe(true);
    expect(balancer.waitForEndpoint()).toBe(500);
    advance(500);
    expect(balancer.pick()).toBe("a");
    expect(balancer.allCoolingDown()).toBe(false);
  });
});

describe("createEndpointBalancer: failures from one tenant's requests alone", () => {
  it("rest the endpoint for that tenant only, its rest doubling with each failure after it (regression)", () => {
    const { balancer, advance } = setUp(["a"]);
    const mallory = balancer.forTenant("mallory");
    const alice = balancer.forTenant("alice");
    mallory.reportFailure("a", fault);
    mallory.reportFailure("a", fault);
    // Regression: one account's requests the upstream refuses (a firewall's 403 for their
    // content) rested the endpoint for every account.
    expect(mallory.pick()).toBeUndefined();
    expect(mallory.waitForEndpoint()).toBe(1000);
    expect(alice.pick()).toBe("a");
    expect(alice.waitForEndpoint()).toBe(0);
    expect(alice.allCoolingDown()).toBe(false);
    // As a status shows it, resting while no one was served since (a deployment's only account);
    // not once another tenant is.
    expect([balancer.allCoolingDown(), balancer.restingCount()]).toEqual([true, 1]);
    alice.reportSuccess("a");
    expect([balancer.allCoolingDown(), balancer.restingCount()]).toEqual([false, 0]);

    advance(1000);
    expect(mallory.pick()).toBe("a");
    mallory.reportFailure("a", fault);
    expect(mallory.waitForEndpoint()).toBe(2000);
    expect(alice.pick()).toBe("a");
    // A success of the tenant's own ends the doubling.
    advance(2000);
    mallory.reportSuccess("a");
    mallory.reportFailure("a", fault);
    expect(mallory.pick()).toBe("a");
  });

  it("rest it for that tenant only back from a rest for everyone too (regression: kept resting for all, doubling)", () => {
    const { balancer, advance } = setUp(["a"]);
    const [alice, bob, mallory] = ["alice", "bob", "mallory"].map((tenant) => balancer.forTenant(tenant));
    alice?.reportFailure("a", fault);
    mallory?.reportFailure("a", fault);
    expect(balancer.waitForEndpoint()).toBe(1000);
    advance(1000);
    // Back from the rest for all: one failure of the attacker's rested it for all again, twice as long.
    mallory?.reportFailure("a", fault);
    expect(alice?.pick()).toBe("a");
    mallory?.reportFailure("a", fault);
    expect([mallory?.pick(), alice?.pick()]).toEqual([undefined, "a"]);
    // Its failures while it rests alone (or back from that) do not pile up in the run: another
    // tenant's single failure is not a rest for all.
    advance(1000);
    for (let attempt = 0; attempt < 4; attempt++) {
      mallory?.reportFailure("a", fault);
      advance(3000);
    }
    bob?.reportFailure("a", fault);
    expect(alice?.pick()).toBe("a");
    // A dead endpoint fails several tenants: one failure each and it rests for all, doubled.
    alice?.reportFailure("a", fault);
    expect(balancer.waitForEndpoint()).toBe(2000);
  });

  it("forget the oldest half of their tenants' rests past a thousand, without a scan per failure", () => {
    const { balancer } = setUp(["a"]);
    for (let tenant = 0; tenant < 1001; tenant++) {
      const view = balancer.forTenant(`t${tenant}`);
      view.reportFailure("a", fault);
      view.reportFailure("a", fault);
    }
    expect(balancer.forTenant("t0").pick()).toBe("a");
    expect(balancer.forTenant("t999").pick()).toBeUndefined();
    expect(balancer.forTenant("t1000").pick()).toBeUndefined();
  });

  it("rest it for everyone once another tenant's failure, or one without a tenant, joins the run", () => {
    for (const other of ["alice", undefined]) {
      const { balancer } = setUp(["a"]);
      balancer.forTenant("mallory").reportFailure("a", fault);
      balancer.forTenant(other).reportFailure("a", fault);
      expect(balancer.forTenant("bob").pick()).toBeUndefined();
      expect([balancer.allCoolingDown(), balancer.restingCount()]).toEqual([true, 1]);
    }
  });

  it("tell the tenant what only the operator can mend, and not the others", () => {
    const { balancer } = setUp(["a"]);
    const mallory = balancer.forTenant("mallory");
    const refused = { ...fault, operatorFault: "refused Tollgate's credentials (HTTP 403)" };
    mallory.reportFailure("a", refused);
    mallory.reportFailure("a", refused);
    expect(mallory.operatorFaults()).toEqual(["refused Tollgate's credentials (HTTP 403)"]);
    expect(balancer.forTenant("alice").operatorFaults()).toEqual([]);
    expect(balancer.operatorFaults()).toEqual([]);
  });
});
