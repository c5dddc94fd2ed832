// Imported for its effect, first of all (cli/main.ts): see debug.ts.
import { quietDebugUnlessAsked } from "./debug.js";

quietDebugUnlessAsked();
