// Run before `npm start`, `npm test`, `npm run bench` and `npm run seed`: on a Node.js older than package.json's
// `engines` the TypeScript entry points cannot even load (no type stripping), so say so in one line instead of a
// stack trace. CommonJS and plain JavaScript, so that any Node.js can read it. npm's scripts find the Node.js that
// `npm install` brings (the `node` package, node_modules/.bin/node) before the machine's own.
'use strict';
const { engines } = require('../package.json');
const wanted = Number(/^>=\s*(\d+)/.exec(engines.node)[1]);
const major = Number(process.versions.node.split('.')[0]);
if (major < wanted) {
  console.error(
    `paginated-collections needs Node.js ${engines.node}, and this is ${process.version} (${process.execPath}): ` +
      'run `npm install` (it brings Node.js 24 from the npm registry) and then `npm start`, or use a Node.js 24 of your own',
  );
  process.exit(1);
}
