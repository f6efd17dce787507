from gradscope.cli import main

main()
