// Prints the price data of the providers named on the command line, in
// that order, as bundled in the pinned @pydantic/genai-prices (see
// package.json and package-lock.json), with the package's name, version and
// license and homepage: the input of the Go generator beside this file (go run
// ./pricecatalog, or make prices). The numbers are printed as JavaScript
// prints them, the shortest decimal text that reads back as the same number:
// the text of the database's own prices, which the generator converts to
// picodollars exactly.
import { readFileSync } from 'node:fs';
import { findProvider } from '@pydantic/genai-prices';

const ids = process.argv.slice(2);
if (ids.length === 0) {
  console.error('usage: node dump.mjs PROVIDER_ID...');
  process.exit(2);
}
const providers = ids.map((id) => {
  // findProvider({providerId}) returns the package's bundled data: nothing
  // is fetched (only updatePrices would fetch newer data).
  const p = findProvider({ providerId: id });
  if (!p || p.id !== id) {
    console.error(`@pydantic/genai-prices has no provider ${JSON.stringify(id)}`);
    process.exit(1);
  }
  return p;
});
// The package's exports do not include its package.json: read the file.
const pkg = JSON.parse(
  readFileSync(new URL('./node_modules/@pydantic/genai-prices/package.json', import.meta.url), 'utf8'),
);
process.stdout.write(
  JSON.stringify({ package: pkg.name, version: pkg.version, license: pkg.license, homepage: pkg.homepage, providers }, null, 1) + '\n',
);
