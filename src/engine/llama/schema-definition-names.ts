import { decodePointerSegment } from "./resolve-json-pointer.ts";

const rootDefinitionName = "tollgate_root";
/** A `$defs` name taken from a reference longer than this is cut: it only has to be unique. */
const maxDefinitionNameLength = 64;

/** The `$defs` names a conversion gives the schemas its references point at. */
export class SchemaDefinitionNames {
  /** The `$defs` name of each referenced schema, by identity, so two pointers to it share one. */
  readonly #names = new Map<object, string>();

  /** The `$defs` names given so far. */
  readonly #taken = new Set<string>();
  /** Per wanted `$defs` name, the suffix to try next when it is taken (see `name`). */
  readonly #nextSuffix = new Map<string, number>();

  /** The `$defs` name of a referenced schema: its pointer's last segment (cut), made unique. */
  name(target: Record<string, unknown>, reference: string): string {
    const known = this.#names.get(target);
    if (known !== undefined) return known;
    const wanted =
      reference === "#"
        ? rootDefinitionName
        : (decodePointerSegment(reference.slice(reference.lastIndexOf("/") + 1)) ?? "").slice(
            0,
            maxDefinitionNameLength,
          );
    let name = wanted;
    // Counted on from the last suffix this name was given: counting from 2 each time made k
    // schemas wanting one name cost k^2/2 look-ups (15,000 references in one tool: seconds).
    let suffix = this.#nextSuffix.get(wanted) ?? 2;
    while (this.#taken.has(name) || (name === rootDefinitionName && reference !== "#")) {
      name = `${wanted}_${suffix}`;
      suffix++;
    }
    this.#nextSuffix.set(wanted, suffix);
    this.#names.set(target, name);
    this.#taken.add(name);
    return name;
  }
}
