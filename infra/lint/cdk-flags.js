// Rewrites infra/cdk.json's context with the recommended feature flags of
// the aws-cdk-lib whose cx-api/lib/features.js is given (what `cdk init`
// writes into a new project). Used by `make cdk-flags`.
const fs = require("fs");
const [features, file] = process.argv.slice(2);
const flags = require(features).CURRENTLY_RECOMMENDED_FLAGS;
const cdk = JSON.parse(fs.readFileSync(file));
cdk.context = Object.fromEntries(Object.keys(flags).sort().map((k) => [k, flags[k]]));
fs.writeFileSync(file, JSON.stringify(cdk, null, 2) + "\n");
console.log(`${file}: ${Object.keys(flags).length} flags`);
