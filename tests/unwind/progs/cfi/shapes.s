/*
 * shapes.s — hand-written CFI for test_cfi.c at the edges of what an
 * unwind row holds (src/unwind/unwind_row.h): rbp kept in another
 * register, undefined, saved out of reach or given as a value; a CFA on
 * rbx or too far up; the return address in a register or undefined; a
 * signal frame with ordinary rules. Assembled into a shared object whose
 * table is compared with libdw; never run.
 */
	.text

	.globl	shape_rbp_in_register
	.type	shape_rbp_in_register, @function
shape_rbp_in_register:
	.cfi_startproc
	mov	%rbp, %rbx
	.cfi_register %rbp, %rbx
	nop
	mov	%rbx, %rbp
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	shape_rbp_in_register, .-shape_rbp_in_register

	.globl	shape_rbp_undefined
	.type	shape_rbp_undefined, @function
shape_rbp_undefined:
	.cfi_startproc
	.cfi_undefined %rbp
	nop
	ret
	.cfi_endproc
	.size	shape_rbp_undefined, .-shape_rbp_undefined

	.globl	shape_rbp_far
	.type	shape_rbp_far, @function
shape_rbp_far:
	.cfi_startproc
	sub	$1600, %rsp
	.cfi_adjust_cfa_offset 1600
	mov	%rbp, (%rsp)
	.cfi_offset %rbp, -1608
	nop
	add	$1600, %rsp
	.cfi_adjust_cfa_offset -1600
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	shape_rbp_far, .-shape_rbp_far

	.globl	shape_rbp_value
	.type	shape_rbp_value, @function
shape_rbp_value:
	.cfi_startproc
	.cfi_val_offset %rbp, 0
	nop
	ret
	.cfi_endproc
	.size	shape_rbp_value, .-shape_rbp_value

	.globl	shape_cfa_rbx
	.type	shape_cfa_rbx, @function
shape_cfa_rbx:
	.cfi_startproc
	mov	%rsp, %rbx
	.cfi_def_cfa_register %rbx
	nop
	.cfi_def_cfa_register %rsp
	ret
	.cfi_endproc
	.size	shape_cfa_rbx, .-shape_cfa_rbx

	.globl	shape_cfa_far
	.type	shape_cfa_far, @function
shape_cfa_far:
	.cfi_startproc
	sub	$0x100000, %rsp
	.cfi_adjust_cfa_offset 0x100000
	nop
	add	$0x100000, %rsp
	.cfi_adjust_cfa_offset -0x100000
	ret
	.cfi_endproc
	.size	shape_cfa_far, .-shape_cfa_far

	.globl	shape_ra_in_register
	.type	shape_ra_in_register, @function
shape_ra_in_register:
	.cfi_startproc
	pop	%rax
	.cfi_adjust_cfa_offset -8
	.cfi_register %rip, %rax
	nop
	jmp	*%rax
	.cfi_endproc
	.size	shape_ra_in_register, .-shape_ra_in_register

	.globl	shape_outermost
	.type	shape_outermost, @function
shape_outermost:
	.cfi_startproc
	.cfi_undefined %rip
	nop
	hlt
	.cfi_endproc
	.size	shape_outermost, .-shape_outermost

	.globl	shape_signal_ordinary
	.type	shape_signal_ordinary, @function
shape_signal_ordinary:
	.cfi_startproc
	.cfi_signal_frame
	nop
	ret
	.cfi_endproc
	.size	shape_signal_ordinary, .-shape_signal_ordinary

	.section .note.GNU-stack,"",@progbits
