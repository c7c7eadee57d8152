from backend.sim.__main__ import main

raise SystemExit(main())
