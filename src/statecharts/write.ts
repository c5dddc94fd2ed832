/** Writes one Mermaid diagram per machine into outDir; returns the files written. (Filled in by the spine.) */
export async function writeStatecharts(_outDir: string): Promise<string[]> {
  throw new Error("not yet implemented");
}
