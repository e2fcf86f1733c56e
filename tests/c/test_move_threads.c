#include "check.h"
#include <strideweave/strideweave.h>
int main(void){return check_report("move_threads");}
