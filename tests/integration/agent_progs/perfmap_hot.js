// perfmap_hot.js — a Node program whose CPU goes to one named function,
// for tests/integration/agent_perfmap.sh (run with --perf-basic-prof
// --allow-natives-syntax). Usage: node ... perfmap_hot.js SECONDS.
//
// kilnHotArith does arithmetic in a loop and is optimized by V8 into JIT
// code that the perf map names; its caller is kept interpreted so that
// kilnHotArith is never inlined into it (and keeps its own name).
'use strict';

function kilnHotArith(n) {
	let x = 0;
	for (let i = 0; i < n; i++) {
		x = (x * 31 + i) % 1000003;
	}
	return x;
}

function driver(seconds) {
	const end = Date.now() + seconds * 1000;
	let sum = 0;
	while (Date.now() < end) {
		sum += kilnHotArith(200000);
	}
	return sum;
}

%NeverOptimizeFunction(driver);
console.log(driver(Number(process.argv[2] || 3)));
