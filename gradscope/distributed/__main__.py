import sys

from gradscope.distributed.run import main

sys.exit(main())
