/** `CONNECT`, `after willDelay` (xstate names delays `xstate.after.<delay>.<state id>`), `DISCONNECT [asksForWill]`. */
export function transitionLabel(event: string, guard: unknown): string {
  const after = /^xstate\.after\.([^.]+)\./.exec(event);
  const name = after ? `after ${after[1]}` : event;
  const g =
    typeof guard === "string"
      ? guard
      : guard && typeof guard === "object" && "type" in guard
        ? String((guard as { type: string }).type)
        : guard
          ? "guarded"
          : "";
  return g ? `${name} [${g}]` : name;
}
