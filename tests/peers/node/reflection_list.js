// Asks a gRPC server what it serves through server reflection, with
// grpc-reflection-js (a reflection client on @grpc/grpc-js): the services
// it lists, and for each the methods of the service as read from the file
// descriptors it sends (with their imports, resolved by the client).
//
// Usage: node reflection_list.js HOST:PORT [TOKEN]
// Prints {"services": [...], "methods": {"pkg.Service": ["Method", ...]},
// "types": {"pkg.Service/Method": ["pkg.Request", "pkg.Response"]}}.
const grpc = require("@grpc/grpc-js");
const { Client } = require("grpc-reflection-js");

async function main() {
	const [addr, token] = process.argv.slice(2);
	const md = new grpc.Metadata();
	if (token) md.add("authorization", `Bearer ${token}`);
	const client = new Client(addr, grpc.credentials.createInsecure(), {}, md);
	const services = await client.listServices();
	const out = { services, methods: {}, types: {} };
	for (const name of services) {
		const root = await client.fileContainingSymbol(name);
		const svc = root.lookupService(name);
		out.methods[name] = Object.keys(svc.methods).sort();
		for (const m of Object.values(svc.methods)) {
			const req = root.lookupType(m.requestType);
			const res = root.lookupType(m.responseType);
			out.types[`${name}/${m.name}`] = [req.fullName.slice(1), res.fullName.slice(1)];
		}
	}
	process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
	process.stderr.write(`reflection_list: ${e.stack || e}\n`);
	process.exit(1);
});
