module kiln.test/peers

go 1.19
