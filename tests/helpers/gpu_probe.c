// SPDX-License-Identifier: MIT
/* Exit 0 if CUDA device 0 can be used, else 1 printing why (the GPU
 * integration tests skip on that). */
#include <stdio.h>

#include "psched.h"

int main(void)
{
	if (psched_cuda_check(0)) {
		printf("%s\n", psched_errmsg());
		return 1;
	}
	printf("CUDA device 0 usable\n");
	return 0;
}
