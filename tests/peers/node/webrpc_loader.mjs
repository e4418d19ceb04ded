// A Node module hook for @parca/client, whose dist/ is ES modules with
// extension-less relative imports in a package not marked "type": "module":
// such specifiers resolve to "<path>.js", loaded as ES modules.
import { register } from "node:module";

const hooks = `
export async function resolve(specifier, context, next) {
	try {
		return await next(specifier, context);
	} catch (e) {
		if ((specifier.startsWith("./") || specifier.startsWith("../")) &&
		    !specifier.endsWith(".js"))
			return next(specifier + ".js", context);
		throw e;
	}
}
export async function load(url, context, next) {
	if (url.includes("/@parca/client/dist/"))
		return next(url, { ...context, format: "module" });
	return next(url, context);
}
`;
register("data:text/javascript," + encodeURIComponent(hooks), import.meta.url);
