// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${VAR} references are the subject of these tests.
/**
 * YAML syntax errors in the operator's words: two documents in one file said "please use
 * YAML.parseAllDocuments()" (the library's advice to programmers); an unquoted `${VAR}` in a
 * flow mapping gave 24 to 40 errors, none saying to quote it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, formatConfigProblem } from "../../src/catalog/config-error.ts";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

const MODEL = [
  "models:",
  "  - id: a",
  '    pricing: { input_per_million: "1", output_per_million: "2" }',
  '    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }',
];

describe("YAML syntax errors", () => {
  it("a second document is named with the line of its '---'", async () => {
    await folder.write("tollgate.yaml", ["server: { port: 9000 }", "---", ...MODEL, ""].join("\n"));
    expect(await folder.problemsOf()).toEqual([
      ": the config file must hold one YAML document (found a second '---' at line 2); remove that line, or the document it starts",
    ]);
  });

  it("an unquoted ${VAR} in a flow mapping is one problem saying to quote it, the errors it causes counted", async () => {
    await folder.write("tollgate.yaml", ["server: { port: ${PORT} }", ...MODEL, ""].join("\n"));
    const problems = await folder.problemsOf();
    expect(problems[0]).toBe(
      ': ${PORT} is not quoted: YAML reads "{" as the start of a mapping there (in { ... } or [ ... ]); write "${PORT}"',
    );
    expect(problems.slice(1)).toHaveLength(1);
    expect(problems[1]).toMatch(
      /^: and \d+ more YAML syntax errors after line 1, most likely from the unquoted \$\{\.\.\.\} there: quote it, then check again$/,
    );
  });

  it("counts the errors a summing-up line stands for in the message's count (regression: 2 problems above one and 4 more)", async () => {
    await folder.write("tollgate.yaml", ["server: { port: ${PORT} }", ...MODEL, ""].join("\n"));
    const error = await folder.load().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    const more = Number(/and (\d+) more YAML syntax errors/.exec(message)?.[1]);
    expect(more).toBeGreaterThan(1);
    expect(message).toContain(`is not a valid Tollgate configuration (${1 + more} problems):`);
  });

  // Regression: the library's message quoted the token after a stray `]` whole, the admin key
  // in clear on stderr (and in the log, on a reload), above the masked line.
  it("never quotes the file's text in the library's message, only the masked line", async () => {
    const secret = "TOPSECRET-ADMIN-KEY-0123456789";
    for (const text of [
      ["models: [ ]]", `admin_key: "${secret}"`],
      ["models: [ ]]", `admin_key: ${secret}`],
      ["models: [ ]]", `admin_key: '${secret}'`],
      // A generated key that starts with ! or * is read as a tag or an alias.
      ["models: []", `admin_key: !${secret}`],
      ["models: []", `admin_key: *${secret}`],
      ["models: []", `admin_key: !!${secret}`],
      ["models: []", `admin_key: !<${secret}>`],
      ["models: []", `admin_key: !e!${secret}`],
      [`%${secret}`, "---", "models: []"],
      ["models: []", `admin_key: "\\u${secret}"`],
      ["models: []", `admin_key: "\\q${secret}"`],
    ]) {
      await folder.write("tollgate.yaml", [...text, ""].join("\n"));
      const problems = await folder.problemsOf();
      expect(problems.length, text.join("\n")).toBeGreaterThan(0);
      for (const problem of problems) {
        expect(problem).toMatch(/YAML (syntax )?error/);
        expect(problem).not.toContain("TOPSECRET");
        // Not even the first characters of it (an escape sequence's).
        expect(problem).not.toContain("TOPS");
      }
    }
    await folder.write("tollgate.yaml", ["models: []", `admin_key: *${secret}`, ""].join("\n"));
    expect(await folder.problemsOf()).toEqual([
      ": YAML error: Unresolved alias: a value that starts with * is read as a YAML alias; quote it",
    ]);
    await folder.write("tollgate.yaml", ["models: []", `admin_key: !${secret}`, ""].join("\n"));
    expect(await folder.problemsOf()).toContainEqual(
      expect.stringMatching(
        /^: YAML syntax error: Unresolved tag: a value that starts with ! is read as a YAML tag; quote it\nadmin_key: \*+\n/,
      ),
    );
    await folder.write("tollgate.yaml", ["models: [ ]]", `admin_key: "${secret}"`, ""].join("\n"));
    expect(await folder.problemsOf()).toContainEqual(
      expect.stringMatching(
        /^: YAML syntax error: Unexpected double-quoted-scalar token in YAML stream\nadmin_key: "\*+"\n {11}\^$/,
      ),
    );
  });

  it("quoted, the same reference loads, and one in a comment or a quoted string is never blamed", async () => {
    await folder.write("tollgate.yaml", ['server: { port: "${PORT}" }', ...MODEL, ""].join("\n"));
    expect((await folder.load({ env: { PORT: "9123" } })).server.port).toBe(9123);
    await folder.write(
      "tollgate.yaml",
      ["server: { port: 9000 } # not ${HERE}", 'admin_key: "${KEY}"', "models: [ ,, ]", ""].join("\n"),
    );
    const problems = await folder.problemsOf({ env: { KEY: "k" } });
    expect(problems.length).toBeGreaterThan(0);
    for (const problem of problems) expect(problem).toContain("YAML syntax error");
  });

  // Regression: such a value became an object that contains itself, and reading it ran the stack
  // out: "Maximum call stack size exceeded", with no line (a reload logged a RangeError).
  it("an alias inside the value its anchor names is said so, with its line", async () => {
    for (const [text, line] of [
      [["models: []", "x-loop: &a [*a]"], 2],
      [["models: []", "x-loop: &a", "  inner: { again: *a }"], 3],
      [["models: []", "x-loop: &a { <<: *a }"], 2],
    ] as const) {
      await folder.write("tollgate.yaml", [...text, ""].join("\n"));
      const error = await folder.load().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map(formatConfigProblem), text.join("\n")).toEqual([
        `line ${line}: YAML error: an alias (*name) stands inside the value its anchor (&name) names, so that value would contain itself without end; write the value out where the alias is`,
      ]);
    }
    // An alias beside its anchor's value, not in it, is fine.
    await folder.write("tollgate.yaml", ['x-price: &p "1"', "models: []", "admin_key: *p", ""].join("\n"));
    expect((await folder.load()).models).toEqual([]);
  });
});
