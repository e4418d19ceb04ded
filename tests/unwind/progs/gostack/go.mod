module kiln.test/gostack

go 1.19
