// Preloaded into every Node process of the suite (scripts/test.ts puts it in NODE_OPTIONS): a module hook that
// tells Node the format of drizzle-orm's own files without asking its package.json. Node's resolver looks up the
// package scope of every file it loads to learn its format, and materialises that package.json each time,
// parsing its "exports" again: drizzle-orm's is large, and a server loads a hundred-odd files from it, so that
// this was a good part of each process's start. The suite starts some hundreds of Node processes.
// A plain .mjs file: it must load where no type stripping does (the supported-Node check runs an older Node).
import module from 'node:module';

const DRIZZLE = '/node_modules/drizzle-orm/';

// registerHooks is Node's from 22.15 and 23.5; elsewhere (an older Node, Bun) nothing is hooked.
module.registerHooks?.({
  resolve(specifier, context, nextResolve) {
    const parent = context.parentURL;
    // A relative import of a .js file from one of drizzle-orm's ES module files ("type": "module") is an ES module.
    if (
      parent?.includes(DRIZZLE) &&
      parent.endsWith('.js') &&
      specifier.endsWith('.js') &&
      (specifier.startsWith('./') || specifier.startsWith('../'))
    ) {
      return { url: new URL(specifier, parent).href, format: 'module', shortCircuit: true };
    }
    return nextResolve(specifier, context);
  },
});
