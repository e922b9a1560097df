// Verifies webhook deliveries with the official Standard Webhooks library.
// Reads a JSON array of {secret, headers, body} from the file named by the
// first argument (body as the raw string received); prints "verified N" and
// exits 0, or prints the first failure and exits 1.
"use strict";
const fs = require("node:fs");
const { Webhook } = require("standardwebhooks");

const deliveries = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
deliveries.forEach((d, i) => {
	try {
		new Webhook(d.secret).verify(d.body, d.headers);
	} catch (err) {
		console.log(`delivery ${i}: ${err.message}`);
		process.exit(1);
	}
});
console.log(`verified ${deliveries.length}`);
